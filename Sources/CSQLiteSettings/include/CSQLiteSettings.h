#ifndef C_SQLITE_SETTINGS_H
#define C_SQLITE_SETTINGS_H

/// Turns off SQLite's memory statistics for the whole process (`sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)`): with them
/// on, every allocation and free inside SQLite takes a process-wide mutex to count bytes nothing here reads. Valid
/// only before SQLite is initialised (before the process's first connection opens); `sqlite3_config` is variadic, so
/// Swift cannot call it. Returns `SQLITE_OK`, or `SQLITE_MISUSE` when SQLite was already initialised (then nothing
/// changed).
int jb_sqlite_disable_memory_statistics(void);

#endif
