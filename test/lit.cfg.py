# -*- Python -*-
# lit configuration of Cleave's FileCheck tests.

import os
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
