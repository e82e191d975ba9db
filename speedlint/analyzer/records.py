"""Attribute records: objects built from keyword arguments whose attributes are those keywords.

`nets = Munch(encoder=enc, decoder=Decoder(...))`, `SimpleNamespace(...)`, `EasyDict(...)`: then
`nets.decoder(x)` runs `Decoder.forward`. The program model (`program.Program.eval`) types such a
call as a record, `R:<module>:<function or -1>:<line>`, and an attribute of it as the type of
the keyword's value, evaluated where the record was built (so it grows with the inference
rounds like any other type). A record built with `**kwargs` or positional arguments only has
the fields it names.
"""

from __future__ import annotations

from typing import Any, Dict, Set

#: `program.Program` (not imported: the program imports this module)
Program = Any

#: Calls that build an attribute record from their keyword arguments.
RECORD_CALLS = frozenset({"Munch", "munchify", "SimpleNamespace", "EasyDict", "edict", "AttrDict", "DotMap", "Namespace", "Bunch", "Box"})


def record_type(program: Program, mid: int, fid: Any, call: Any) -> str:
    """The type of a record built by `call` (a summary call expression) in module `mid`,
    function `fid` (None at module level); its fields are kept with the program."""
    key = f"R:{mid}:{-1 if fid is None else fid}:{call[4]}"
    records: Dict[str, Any] = program.__dict__.setdefault("_records", {})
    records[key] = call[3]
    return key


def record_field(program: Program, obj: str, name: str) -> Set[str]:
    """The types of field `name` of record `obj`: its keyword's value where the record is built."""
    fields = program.__dict__.get("_records", {}).get(obj)
    if not fields or name not in fields or name in ("*", "**"):
        return set()
    busy: Set[str] = program.__dict__.setdefault("_records_busy", set())
    if obj in busy:
        return set()  # a record holding itself
    _, mid_text, fid_text, _ = obj.split(":")
    mid, fid = int(mid_text), int(fid_text)
    reads, program._reads = program._reads, None  # (the caller notes its read of this field)
    busy.add(obj)
    try:
        if fid < 0:
            env = program.modules[mid].globals_env
            return set(program.eval(mid, None, fields[name], env))
        fn = program.functions[fid][1]
        env = program._local_env(mid, fid, fn)
        return set(program.eval(mid, fid, fields[name], env))
    finally:
        busy.discard(obj)
        program._reads = reads
