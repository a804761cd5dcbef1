"""Effect of attn_lib's glibc allocator setting (attn_lib.process.tune) on forward passes at L = 1024. Not a test.

Runs the same passes twice, each in a fresh process: once with the setting (``process.tune(openmp=False)`` before the
model loads) and once with glibc's defaults. Each process loads the model, then times one pass with the model's
own attention and one with ``--normalizer`` swapped into every head (as chapter 7's live swap does). Printed: seconds
per pass, the process's system CPU time and minor page faults, and the ratio default / switched off.

    python benchmarks/bench_allocator.py [--model smollm2] [--length 1024] [--normalizer sparsemax]

Timings on a shared machine are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from attn_lib import process
if sys.argv[4] == "tuned":
    process.tune(openmp=False)
import torch
from attn_lib import models, normalizers
from attn_lib.capture import capture_attention
h = models.load_model(sys.argv[1], quiet=True)
ids = torch.randint(0, h.tokenizer.vocab_size, (1, int(sys.argv[2])), generator=torch.Generator().manual_seed(0))
out = {}
r0 = resource.getrusage(resource.RUSAGE_SELF)
for label, norm in (("model", None), (sys.argv[3], normalizers.get(sys.argv[3]))):
    t = time.perf_counter()
    with torch.no_grad():
        capture_attention(h, ids, None, normalizer=norm, keep_qk=False)
    out[label] = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
out["sys_s"], out["minflt"] = r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt
print(json.dumps(out))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--normalizer", default="sparsemax")
    a = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; model {a.model}, L = {a.length}, swap: {a.normalizer}")
    res = {}
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    for label in ("tuned", "glibc defaults"):
        cmd = [sys.executable, "-c", CHILD, a.model, str(a.length), a.normalizer, label.split()[0]]
        res[label] = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
    keys = ["model", a.normalizer, "sys_s", "minflt"]
    print(f"{'':16}" + "".join(f"{k:>14}" for k in keys))
    for label, r in res.items():
        print(f"{label:16}" + "".join(f"{r[k]:>14.3g}" for k in keys))
    print(f"{'ratio':16}" + "".join(f"{res['tuned'][k] / res['glibc defaults'][k]:>14.2f}" for k in keys))


if __name__ == "__main__":
    main()
