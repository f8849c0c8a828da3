# -*- Python -*-
# lit configuration of Cleave's FileCheck tests.

import os
import re
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "Cleave"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cleave_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unittests",
                   "grad_model"]

llvm_config.use_default_substitutions()


def runtime_abi_defines(header):
    """FileCheck numeric variables for the numbers of the runtime ABI.

    The lowering's tests must not copy the runtime's numbers (a kind, a
    dtype, the ABI version) by hand: they name them. Every entry
    X(NAME, VALUE, ...) of the X-macro lists of cleave_rt_enums.h becomes
    `-D#CLEAVE_<NAME>=VALUE`, as do CLEAVE_RT_ABI_VERSION and the other
    plain `#define CLEAVE_RT_<NAME> <number>` constants, so that a test
    running `FileCheck %s %rt-abi` matches `[[#CLEAVE_GELU_TANH]]` or
    computes `[[#CLEAVE_F32 + mul(2, 4294967296)]]`. The header is read, not
    compiled: its lists keep one `X(NAME, VALUE, ...)` per line."""
    with open(header) as f:
        text = f.read()
    values = {}
    for name, value in re.findall(r"^\s*X\((\w+),\s*(\d+)\b", text, re.M):
        values["CLEAVE_" + name] = value
    for name, value in re.findall(r"^#define\s+(CLEAVE_RT_\w+)\s+(\d+)\s*$",
                                  text, re.M):
        values[name] = value
    if "CLEAVE_RT_ABI_VERSION" not in values or "CLEAVE_GELU_TANH" not in values:
        lit_config.fatal("cannot read the ABI's lists from " + header)
    return " ".join("-D#%s=%s" % item for item in sorted(values.items()))


config.substitutions.append(("%rt-abi", runtime_abi_defines(os.path.join(
    config.cleave_src_root, "runtime", "include", "cleave", "Runtime",
    "cleave_rt_enums.h"))))
config.substitutions.append(("%examples", os.path.join(config.cleave_src_root, "examples")))

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["cleave-opt", "cleave-translate", "cleave-plan", "cleave-compile"],
    [config.cleave_tools_dir])


def has_cuda_device():
    """Whether a GPU is present: CLEAVE_LIT_CUDA_DEVICE=0/1 decides, else
    `nvidia-smi -L` must list one."""
    forced = os.environ.get("CLEAVE_LIT_CUDA_DEVICE")
    if forced is not None:
        return forced not in ("", "0")
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU " in out.stdout


# `cuda`: cleave-compile links the CUDA backend (CLEAVE_ENABLE_CUDA);
# `cuda-device`: a GPU is present as well, so compiled CUDA programs run.
if config.cleave_enable_cuda:
    config.available_features.add("cuda")
    if has_cuda_device():
        config.available_features.add("cuda-device")
