# -*- Python -*-
# lit configuration of Cleave's FileCheck tests.

import os

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
