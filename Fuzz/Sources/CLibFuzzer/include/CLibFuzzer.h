#ifndef PUSH_CLIBFUZZER_H
#define PUSH_CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer): parses libFuzzer's flags from
// argc/argv and runs `test` on every input. The fuzz targets call it from their own `main`, because
// SwiftPM gives a debug executable's entry point a name of its own and libFuzzer's `main` would then
// never run.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*test)(const uint8_t *data, size_t size));

#endif
