//===- ToolVersion.h - --version of Cleave's tools ---------------*- C++ -*-===//
//
// Every tool's --version names Cleave's version and commit (cleave/Version.h,
// refreshed at every build), then the LLVM it was built on, in place of
// LLVM's own version text.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_TOOLVERSION_H
#define CLEAVE_TOOLS_TOOLVERSION_H

#include "cleave/Version.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace cleave {

/// Makes `tool --version` print "<tool> (Cleave 0.1.0 (<commit>)), built on
/// LLVM <version>"; call before parsing the command line.
inline void setToolVersion(const char *tool) {
  static const char *name = tool;
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << name << " (" CLEAVE_VERSION_STRING "), built on LLVM "
       << LLVM_VERSION_STRING "\n";
  });
}

} // namespace cleave

#endif // CLEAVE_TOOLS_TOOLVERSION_H
