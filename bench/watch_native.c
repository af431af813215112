/* The C function bench_watch.py watches: cheap, so that the cost measured
 * is pyscope's breakpoint, not the work. */
static volatile int sink;

__attribute__((noinline)) void pyscope_bench_append(int size)
{
    sink += size;
}
