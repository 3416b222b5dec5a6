#ifndef PUSH_CRASH_SIGNAL_H
#define PUSH_CRASH_SIGNAL_H



/// `address` is a `struct sockaddr` of `address_length` bytes (kept out of this header so that
/// importing it brings no system module into Swift).
///
/// Installs handlers for the signals a crashing process gets (SIGILL and SIGTRAP from a Swift trap,
/// SIGSEGV, SIGBUS, SIGFPE, SIGABRT). On such a signal the handler connects to `address`, writes
/// `payload` (prepared commands, e.g. Redis `SET <key> <value>`) once, waits up to a second for the
/// server's `replies` answer lines (so the commands were read before the process dies), and hands the
/// signal on to whatever handled it before (the Swift runtime's backtracer, or the default action),
/// so the process still dies as it would have.
///
/// The handler writes the signal number (two digits) at `signal_offset` of the payload, if it is
/// inside it.
/// Only async-signal-safe calls run in the handler. Later calls replace the address and payload.
/// Returns 0, or -1 when the payload is too long (64 KiB) or the address too big.
int push_crash_signal_install(const void *address, unsigned int address_length, const char *payload,
                              unsigned long payload_length, unsigned long signal_offset, int replies);

/// Raises SIGILL the way a Swift trap does, for tests.
void push_crash_signal_trap(void);

#endif
