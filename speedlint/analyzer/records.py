"""Attribute records: objects built from keyword arguments whose attributes are those keywords.

`nets = Munch(encoder=enc, decoder=Decoder(...))`, `SimpleNamespace(...)`, `EasyDict(...)`: then
`nets.decoder(x)` runs `Decoder.forward`. The program model (`program.link.Program.eval`) types
such a call as a record, `R:<module>:<function or -1>:<line>`, and an attribute of it as the type
of the keyword's value, evaluated where the record was built (so it grows with the inference
rounds like any other type). A record built with `**kwargs` or positional arguments only has
the fields it names.
"""

from __future__ import annotations

#: Calls that build an attribute record from their keyword arguments.
RECORD_CALLS = frozenset({"Munch", "munchify", "SimpleNamespace", "EasyDict", "edict", "AttrDict", "DotMap", "Namespace", "Bunch", "Box"})
