// The two glibc calls ChildProcess needs that Swift's Glibc module hides (they are GNU
// extensions, declared only under _GNU_SOURCE).
#include <spawn.h>

/// pipe2(fds, O_CLOEXEC): both ends close-on-exec from the start, with no window in which a
/// child spawned by another thread could inherit them.
int pw_pipe_cloexec(int fds[2]);

/// posix_spawn_file_actions_addclosefrom_np(actions, from): the child closes every descriptor
/// from `from` up, whatever the parent opened meanwhile.
int pw_spawn_close_from(posix_spawn_file_actions_t *actions, int from);
