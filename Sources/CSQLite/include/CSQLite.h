// SQLite 3 (Debian libsqlite3-dev), the registry's embedded store.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import: SQLite copies
// the bound text or blob before the call returns, so Swift's buffer may go away after it. An
// empty Swift string may have no address, and a NULL address would bind SQL NULL, not ''.
static inline int pw_sqlite3_bind_text_copy(sqlite3_stmt *statement, int index, const char *text, int bytes) {
    return sqlite3_bind_text(statement, index, text ? text : "", bytes, SQLITE_TRANSIENT);
}

// SQLITE_STATIC (no copy): the caller keeps the bytes unchanged until the statement is reset
// and its bindings cleared, which it does before the buffer can change.
static inline int pw_sqlite3_bind_text_borrowed(sqlite3_stmt *statement, int index, const char *text, int bytes) {
    return sqlite3_bind_text(statement, index, text ? text : "", bytes, SQLITE_STATIC);
}

// By default SQLite counts every allocation under one process-wide mutex, for statistics this
// process never reads (a lock and an unlock per malloc of every connection). Must run before
// SQLite initialises (the first open); afterwards it is refused, harmlessly (SQLITE_MISUSE).
static inline int pw_sqlite3_skip_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
