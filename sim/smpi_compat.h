/* Force-included (after SMPI's own smpi_helpers.h) into every engine file compiled with smpicc
 * (sim/Makefile).  smpi_helpers.h defines sleep(x) and usleep(x) as function-like macros that
 * redirect to SMPI's simulated sleeps; the engine calls neither, but it has a transport method
 * named sleep (xp->sleep(s, rank, v, ns), src/sched/progress.h), which the one-argument macro rejects.
 * The engine's waits use nanosleep, clock_gettime and sched_yield, which SMPI still intercepts
 * (nanosleep, clock_gettime) or which do not touch simulated time (sched_yield). */
#undef sleep
#undef usleep

/* SimGrid 3.32 does not implement MPI_Comm_idup (it aborts: "Not yet implemented"); the engine
 * duplicates each communicator with it on its first collective there (src/api/context.c, so that the
 * watchdog's wait can time out).  In the simulation every rank makes that first call, so a
 * blocking MPI_Comm_dup and a null request (complete at once) are the same thing:
 * lpsim_comm_idup in sim/lpsim.c. */
#include <mpi.h>
int lpsim_comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
#define MPI_Comm_idup lpsim_comm_idup

/* Waits on communicators spanning several nodes poll: MPI_Testsome, and a yield every 32 empty
 * tests (src/sched/progress.h observe_set: real ranks sharing cores hand the core to one with data to
 * push).  Under SMPI with smpi/test:0 (a test costs no simulated time) such a loop never lets
 * simulated time advance (SimGrid advances it only when every actor blocks), and any
 * smpi/test > 0 charges a growing sleep per request tested, which is no model of a poll either.
 * lpsim_testsome (sim/lpsim.c) returns what MPI_Testsome finds and, where it finds nothing,
 * blocks in MPI_Waitsome: the poll made free and exact, i.e. the engine's waits as they were
 * before polling, which is what an idle core's poll amounts to.  Valid for the driver, which
 * makes blocking calls only (observe_set(1)); lp_test/lp_progress (observe_set(0)) would block. */
int lpsim_testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]);
#define MPI_Testsome lpsim_testsome
