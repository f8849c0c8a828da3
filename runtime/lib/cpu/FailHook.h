//===- FailHook.h - what cleave_rt_fail does before it exits -----*- C++ -*-===//
//
// cleave_rt_fail prints its message and exits the process. In a job of many
// ranks that would leave the other ranks waiting for this one, so the
// communication engine (runtime/lib/comm) installs a hook that ends the whole
// job (MPI_Abort) after the message is printed.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CPU_FAILHOOK_H
#define CLEAVE_RUNTIME_LIB_CPU_FAILHOOK_H

namespace cleave::rt {

/// Called by cleave_rt_fail after its message is written, instead of
/// returning to exit(1) (the hook may not return). Null removes it. The hook
/// is removed before it runs, so a failure inside it exits normally.
using FailHook = void (*)();
void setFailHook(FailHook hook);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_LIB_CPU_FAILHOOK_H
