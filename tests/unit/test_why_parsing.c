/* The small parsers `pyscope why` relies on: --interval durations and the
 * pipe inodes of /proc fd links. */
#include "cmd/cli.h"
#include "target/pipe_peers.h"
#include "unit.h"

static long duration(const char *text)
{
    long ms = -12345;
    return cli_parse_duration_ms(text, 60000, &ms) ? ms : -1;
}

int main(void)
{
    CHECK_EQ_INT(duration("150"), 150);
    CHECK_EQ_INT(duration("150ms"), 150);
    CHECK_EQ_INT(duration("2s"), 2000);
    CHECK_EQ_INT(duration("0.25s"), 250);
    CHECK_EQ_INT(duration("1m"), 60000);
    CHECK_EQ_INT(duration("0"), 0);
    CHECK_EQ_INT(duration("0s"), 0);
    CHECK_EQ_INT(duration("1.5"), 2);        /* milliseconds, rounded */
    CHECK_EQ_INT(duration("61s"), -1);       /* over the maximum */
    CHECK_EQ_INT(duration("-1s"), -1);
    CHECK_EQ_INT(duration("+1s"), -1);
    CHECK_EQ_INT(duration("2x"), -1);
    CHECK_EQ_INT(duration("s"), -1);
    CHECK_EQ_INT(duration(""), -1);
    CHECK_EQ_INT(duration("2 s"), -1);
    CHECK_EQ_INT(duration("nan"), -1);
    CHECK_EQ_INT(duration("inf"), -1);

    CHECK_EQ_INT(pipe_inode("pipe:[578815]"), 578815);
    CHECK_EQ_INT(pipe_inode("pipe:[12"), 0);
    CHECK_EQ_INT(pipe_inode("socket:[578815]"), 0);
    CHECK_EQ_INT(pipe_inode("/dev/null"), 0);
    return unit_report("test_why_parsing");
}
