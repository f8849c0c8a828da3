//===- WaitHook.h - what the backend does while the host waits ---*- C++ -*-===//
//
// The NCCL engine (runtime/lib/comm) leaves its collectives running on the
// device when they return, so a collective that another rank never joins
// shows only when the host next waits for the device: at the trainer's
// marker, or a synchronizing read. The engine installs a hook that the CUDA
// backend calls between its polls while the host waits (its watchdog checks
// the collectives in flight and fails the job when one is overdue), so that
// such a wait ends in an error instead of hanging.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CPU_WAITHOOK_H
#define CLEAVE_RUNTIME_LIB_CPU_WAITHOOK_H

namespace cleave::rt {

/// Called by the backend, repeatedly, while the host waits for the device;
/// it must not wait itself. Null (the default) lets the backend block in
/// the device's own synchronization.
using WaitHook = void (*)();
void setWaitHook(WaitHook hook);
WaitHook waitHook();

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_LIB_CPU_WAITHOOK_H
