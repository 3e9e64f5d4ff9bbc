"""`convgen audit`: the compile-only audit of the kernels a device would launch
(convaudit/audit.py), as a command convgen finds (convgen.commands.PLUGINS)."""
from __future__ import annotations

import json

from convgen import gpus
from convgen.commands import Command
from convgen.errors import ConvgenError
from convgen.flags import as_text, flag_table, looks_like_flag, one_of, scan, split_flags, switch

AUDIT_FLAGS = flag_table(
    ("convgen audit (positional arguments: lit test files or folders; default e2e/)", [
        ("target", "target", one_of(*gpus.ARCHS),
         "the arch to compile for (no GPU needed)", "required"),
        ("device", "device", as_text, "the device whose units count programs and waves "
         "(a name of tools/convgen/gpus.py DEVICES)", "the arch's reference device"),
        ("lines", "lines", as_text, "instead of lit tests, a file of convgen flag sets, one "
         "per line (as convgen tune --lines takes it)", "off"),
        ("nightly", "nightly", switch(), "the nightly set's tests too", "the PR set"),
        ("json", "json", as_text, "also write every kernel's facts to this JSON file", "off"),
        ("quiet", "quiet", switch(), "print the summary line alone", "off"),
    ]))


def _audit(name: str, args: list[str]) -> int:
    from convaudit import audit  # torch and Triton
    mine, paths = split_flags(list(args), AUDIT_FLAGS)
    values = scan(mine, AUDIT_FLAGS)
    for p in paths:
        if looks_like_flag(p):
            raise ConvgenError(f"unknown flag '{p}' (see convgen audit --help)")
    values["paths"] = paths
    target = values.get("target")
    if not target:
        raise ConvgenError(f"--target is required ({', '.join(gpus.ARCHS)})", field="target")
    device = values.get("device")
    if device and gpus.device(device) is None:
        raise ConvgenError(f"unknown device '{device}' (known: {', '.join(gpus.DEVICES)})",
                           field="device")
    if device and gpus.device(device).arch != target:
        raise ConvgenError(f"{device} is a {gpus.device(device).arch}, not a {target}",
                           field="device")
    if values.get("lines"):
        runs = audit.line_runs(values["lines"])
    else:
        runs = audit.listed_runs(target, values.get("paths") or ["e2e/"], values.get("nightly", False))
    kernels, counts = audit.audit(runs, target, device)
    found = audit.findings(kernels, target, device)
    if not values.get("quiet"):
        print(f"# {counts['runs']} convgen runs on {target} ({found['device']}, "
              f"{found['units']} units): {len(kernels)} distinct kernels; "
              f"{counts['refused']} runs refused (tests of refusals, types the target lacks)")
        for k in kernels:
            print(audit.row(k, target))
        for title, key in (("spilling", "spilling"), ("without matrix instructions", "no_matrix"),
                           ("the rule's, at one program per CU where LDS holds two", "one_per_unit"),
                           ("not compiled", "errors")):
            for k in found[key]:
                print(f"# {title}: {k.name} {k.what} [{k.config}] in {k.tests[0]}"
                      + (f" and {len(k.tests) - 1} more" if len(k.tests) > 1 else ""))
    if values.get("json"):
        with open(values["json"], "w") as f:
            json.dump([{"kernel": k.name, "problem": k.what, "config": k.config,
                        "source": k.source, "matrix_path": k.matrix_path, "programs": k.programs,
                        "tests": k.tests, "run_programs": k.run_programs, "error": k.error, **k.facts}
                       for k in kernels], f, indent=1)
    print(audit.summary(target, found))
    bad = found["spilling"] or found["no_matrix"] or found["errors"]
    return 1 if bad else 0


COMMANDS = (
    Command("audit", "convgen audit --target ARCH [--device NAME] [--lines FILE] [TESTS...]",
            "Compiles, without a GPU, the conv kernels the target would launch for the lit tests "
            "(the PR set by default)\nor the given command lines, as a real launch there "
            "specializes them, and prints per kernel its\nmatrix instructions, registers, "
            "spills, LDS, occupancy, programs per CU and waves on the device.\n"
            "Exits 1 when a kernel spills, a matrix-core kernel has no matrix instructions, or "
            "one does not compile.\n", AUDIT_FLAGS, _audit),
)
