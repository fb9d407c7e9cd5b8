/* obs/obs.h: what the recorder's three files share (private to obs/): recorder.c (the ring's
 * settings, what a running request waits for, the communicators, a peer gone, the dumps),
 * trace.c (LPMPI_TRACE's buffers and file), watch.c (the watch thread: SIGUSR1, the launcher's
 * notices, LPMPI_ABORT_TIMEOUT).  Each uses only the ones before it in that list: the recorder
 * flushes the trace after a dump through lp_fr_flush_hook, which trace.c sets; trace.c wakes the
 * watch thread through lp_obs_wake_fd, which watch.c sets. */
#ifndef LPMPI_OBS_H
#define LPMPI_OBS_H

#include "engine.h"
#include "flight.h"
#include <time.h>

#pragma GCC visibility push(hidden)
/* ---- recorder.c */
extern double lp_obs_abort_after_s;          /* LPMPI_ABORT_TIMEOUT (0: off) */
extern int lp_obs_world_rank, lp_obs_world_size;
extern void (*lp_fr_flush_hook)(void);
extern atomic_llong lp_obs_notice_ns;         /* the launcher's last notice (watch.c stores it) */
long long lp_obs_mono_ns(clockid_t c);
int lp_obs_mkdirs(const char *path);
/* ---- trace.c */
extern int lp_obs_wake_fd;
void lp_trace_drain(void);                   /* the full buffer, if one waits, written */
void lp_trace_reanchor(void);
#pragma GCC visibility pop

#endif
