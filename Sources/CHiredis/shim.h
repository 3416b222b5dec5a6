#ifndef PUSH_CHIREDIS_SHIM_H
#define PUSH_CHIREDIS_SHIM_H

// Only the argv forms of hiredis are used (binary-safe, not variadic): redisCommandArgv and
// redisAppendCommandArgv. redisCommand/redisvCommand are deliberately not wrapped.
#include <hiredis/hiredis.h>

#endif
