"""SPD106 (per-sample heavy work) and SPD501 (loops over the batch): what their findings say, where
they point, and the program facts behind them (cache files, hand-written loaders)."""

from __future__ import annotations

import ast
import textwrap

from conftest import FIXTURES
from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.program.facts import link
from speedlint.analyzer.program.summary import cache_fill_lines, summarize
from speedlint.analyzer.registry import select_rules
from speedlint.analyzer.rule import LOW, MEDIUM
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths


def _fixture_findings(code: str):
    path = FIXTURES / "rules" / f"{code}.py"
    text = path.read_text(encoding="utf-8")
    settings = Settings(select=(code,))
    seeds = link([(str(path.resolve()), str(path), summarize(text))]).get(str(path))
    return text, analyze_text(text, str(path), select_rules(settings.select), settings, seeds=seeds).findings


def _line_of(text: str, needle: str) -> int:
    (line,) = [i for i, l in enumerate(text.splitlines(), start=1) if needle in l]
    return line


def _project(name: str, monkeypatch):
    monkeypatch.chdir(FIXTURES / "projects" / name)
    resolver = SettingsResolver(Overrides(select=("SPD106", "SPD501"), preview=True), isolated=True)
    return check_paths(["."], resolver, use_cache=False, jobs=1).findings


def test_a_same_file_helper_names_the_getitem_call_site():
    text, findings = _fixture_findings("SPD106")
    heavy = _line_of(text, "mesh = trimesh.load(path)")
    (finding,) = [f for f in findings if f.line == heavy]
    call_site = _line_of(text, "return self.load_mesh(self.files[index])")
    assert [(line, label) for _, line, label in finding.related] == [(call_site, "self.load_mesh(...)")]
    assert f":{call_site} `self.load_mesh(...)` ->" in finding.message


def test_a_heavy_call_in_another_module_names_the_chain(monkeypatch):
    findings = _project("dataset_features_elsewhere", monkeypatch)
    (fbank,) = [f for f in findings if f.path.endswith("features.py")]
    assert fbank.related[-1][:3] == ("data/dataset.py", 24, "self.featurizer(...)")
    assert "torchaudio.compliance.kaldi.fbank" in fbank.message
    assert "for every sample" in fbank.message


def test_the_batch_loop_of_a_hand_written_loader_makes_its_dataset_method_per_sample(monkeypatch):
    findings = _project("hand_written_loader", monkeypatch)
    (mfcc,) = findings
    assert mfcc.path.endswith("features.py")
    assert mfcc.related[0][:3] == ("loader.py", 20, "self.dataset.get_item(...)")


def test_worker_caches_and_opt_in_preprocessing_are_explained():
    text, findings = _fixture_findings("SPD106")
    by_line = {f.line: f for f in findings}
    cached = by_line[_line_of(text, "points = np.loadtxt(self.files[index])  # expect")]
    assert "fills in each DataLoader worker separately" in cached.message
    opt_in = by_line[_line_of(text, "return sample_surface(self.clouds[index], self.count)")]
    assert "only when `self.preprocess` is set, and it is off by default" in opt_in.message
    # the sample's own file is its primary read: never reported; one fixed file decoded per sample is, at low
    assert _line_of(text, "data, sr = sf.read(path)") not in by_line
    decode = by_line[_line_of(text, 'silence, _ = sf.read("silence.wav")')]
    assert decode.impact.level == LOW and opt_in.impact.level == MEDIUM
    # work in a helper outside the dataset sits on the dataset's call of it, the work as related
    mel = by_line[_line_of(text, "mel = wave_to_mel(wave)")]
    assert "`wave_to_mel(...)` extracts features (`MelSpectrogram`)" in mel.message
    assert mel.related[-1][1] == _line_of(text, "return torch.log(1e-5 + TO_MEL(")


def test_cache_fill_lines():
    source = textwrap.dedent(
        """
        def a(path):
            if os.path.exists(path + ".npy"):
                x = np.load(path + ".npy")
            else:
                x = features(path)
                np.save(path + ".npy", x)
            return x

        def b(path):
            if os.path.isfile(path + ".pt"):
                return torch.load(path + ".pt")
            spec = spectrogram(path)
            torch.save(spec, path + ".pt")
            return spec

        def c(path):
            if not Path(path).exists():
                pickle.dump(parse(path), open(path, "wb"))

        def d(path):
            if os.path.exists(path):
                x = load(path)
            else:
                x = features(path)
            return x
        """
    )
    lines = cache_fill_lines(ast.parse(source))
    text = source.splitlines()
    filled = {text[i - 1].strip() for i in lines}
    assert "x = features(path)" in filled and "np.save(path + \".npy\", x)" in filled
    assert "spec = spectrogram(path)" in filled
    assert "pickle.dump(parse(path), open(path, \"wb\"))" in filled
    assert "x = np.load(path + \".npy\")" not in filled
    d_starts = next(i for i, l in enumerate(text, start=1) if l.startswith("def d("))
    assert not [i for i in lines if i > d_starts]  # `d` saves nothing: not a cache


def test_loop_findings_say_how_often_and_what_to_do_instead():
    text, findings = _fixture_findings("SPD501")
    by_line = {f.line: f for f in findings}
    evaluation = by_line[_line_of(text, "for idx in range(targets.size(0)):  # expect")]
    assert evaluation.impact.level == LOW and "an evaluation loop" in evaluation.message
    rows = by_line[_line_of(text, "for i, n in enumerate(lengths):  # expect")]
    assert rows.impact.level == MEDIUM and "torch.arange" in rows.fix.title
    values = by_line[_line_of(text, "for c in torch.unique(labels):  # expect")]
    assert "once per value" in values.message and "bincount" in values.fix.title
