"""Training configuration files (YAML, JSON, TOML, INI) that the checked code reads.

* `reader`: each format read into a small tree whose scalars know their line and columns (no
  dependency: a reader for the YAML subset training configs use; `json`, `tomllib` and
  `configparser` checked against a line scan). What a reader cannot read is "not understood".
* `discovery`: the config files beside the Python files of a run (globs from the settings).
* `sources`: one config as the code sees it: Hydra's `defaults:` list, a `base:`/`_base_:` file
  it inherits from; a key path looked up gives the value and the line that holds it.
* `summary` / `flow`: the whole-program part: which names, parameters and `self` attributes are
  config objects (loaded with `yaml.safe_load`, `json.load`, `OmegaConf.load`, `configparser`,
  Hydra's `@hydra.main`), and which file each one reads.
* `edit`: a fix that changes one value in place, keeping comments and formatting, and checks
  that the file still reads as the same structure.
"""
