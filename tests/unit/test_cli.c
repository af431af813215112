/* Checks the option tables of cmd/cli.h: one table gives the parser (short
 * and long names, arguments, "--" and the first program word, the shared
 * value rules such as --rate's, a refused value's exit status) and the usage
 * text (the help column, a row too wide for it, continuation lines, text
 * rows, rows shown but parsed elsewhere). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "unit.h"

struct values {
    bool flag, on;
    const char *name;
    pid_t pid;
    double rate, seconds;
    int calls;
    bool name_given;
};

static struct values v;

static int count_call(const char *arg, void *value)
{
    if (strcmp(arg, "bad") == 0) {
        fprintf(stderr, "pyscope: --call refuses 'bad'\n");
        return 7;
    }
    (*(int *)value)++;
    return 0;
}

static const char *filler(void)
{
    return "a, b";
}

static const struct cli_option options[] = {
    CLI_OPT('f', "flag", NULL, "a flag", CLI_FLAG, &v.flag),
    CLI_OPT(0, "no-on", NULL, "clears on", CLI_CLEAR, &v.on),
    CLI_OPT('n', "name", "NAME", "a name\nover two lines", CLI_STRING, &v.name,
            .given = &v.name_given),
    CLI_OPT('p', "pid", "PID", "a process", CLI_PID, &v.pid),
    CLI_OPT('r', "rate", "HZ", "samples per second", CLI_RATE, &v.rate),
    CLI_OPT(0, "max-rate", "HZ", "or max", CLI_RATE_OR_MAX, &v.rate),
    CLI_LINE("\nMore:"),
    CLI_OPT(0, "seconds", "=SECS", "how long", CLI_SECONDS, &v.seconds,
            .error = "--seconds takes seconds"),
    CLI_OPT(0, "a-very-long-option", "ARGUMENT", "its help on the next line", CLI_CALL, &v.calls,
            .call = count_call),
    CLI_OPT('s', "subprocesses", NULL, "handled elsewhere", CLI_FLAG, NULL, .usage_only = true),
    CLI_OPT(0, "format", "F", "one of %s", CLI_STRING, &v.name, .help_value = filler),
    CLI_HELP_OPTION,
    {0},
};

static const struct cli_command cmd = {
    .usage = "usage: test [options] -- PROGRAM\n\n",
    .options = options,
    .help_column = 20,
    .epilogue = "\nthe end\n",
    .stop_at_program = true,
};

static int parse(char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    memset(&v, 0, sizeof v);
    v.on = true;
    return cli_parse(&cmd, argc, argv);
}

static void test_parse(void)
{
    char *args[] = {"test", "-f", "--no-on", "-n", "x", "--pid", "42", "-r", "250",
                    "--seconds=1.5", "--a-very-long-option", "y", "--", "prog", "-f", NULL};
    CHECK_EQ_INT(parse(args), CLI_CONTINUE);
    CHECK(v.flag);
    CHECK(!v.on);
    CHECK_EQ_STR(v.name, "x");
    CHECK(v.name_given);
    CHECK_EQ_INT(v.pid, 42);
    CHECK(v.rate == 250);
    CHECK(v.seconds == 1.5);
    CHECK_EQ_INT(v.calls, 1);
    /* The program's own flags are its own. */
    CHECK_EQ_INT(optind, 13);
    CHECK_EQ_STR(args[optind], "prog");

    char *bare[] = {"test", "-f", "prog", "-n", "z", NULL};
    CHECK_EQ_INT(parse(bare), CLI_CONTINUE);
    CHECK_EQ_INT(optind, 2);
    CHECK(!v.name_given);
}

static void test_refusals(void)
{
    /* The one --rate rule: more than 0, up to CLI_MAX_RATE_HZ; "max" only
     * where the row allows it. */
    char *top[] = {"test", "-r", "100000", NULL};
    CHECK_EQ_INT(parse(top), CLI_CONTINUE);
    CHECK(v.rate == CLI_MAX_RATE_HZ);
    char *over[] = {"test", "-r", "100001", NULL};
    CHECK_EQ_INT(parse(over), 2);
    char *zero[] = {"test", "-r", "0", NULL};
    CHECK_EQ_INT(parse(zero), 2);
    char *nan[] = {"test", "-r", "nan", NULL};
    CHECK_EQ_INT(parse(nan), 2);
    char *max[] = {"test", "-r", "max", NULL};
    CHECK_EQ_INT(parse(max), 2);
    char *max_ok[] = {"test", "--max-rate", "max", NULL};
    v.rate = 5;
    CHECK_EQ_INT(parse(max_ok), CLI_CONTINUE);
    CHECK(v.rate == 0);

    char *pid[] = {"test", "-p", "0", NULL};
    CHECK_EQ_INT(parse(pid), 2);
    char *secs[] = {"test", "--seconds", "-1", NULL};
    CHECK_EQ_INT(parse(secs), 2);
    char *call[] = {"test", "--a-very-long-option", "bad", NULL};
    CHECK_EQ_INT(parse(call), 7);
    char *unknown[] = {"test", "--nope", NULL};
    CHECK_EQ_INT(parse(unknown), 2);
    /* Shown in the usage, but taken before the table (tree.c): not an option here. */
    char *usage_only[] = {"test", "-s", NULL};
    CHECK_EQ_INT(parse(usage_only), 2);
    char *missing[] = {"test", "-n", NULL};
    CHECK_EQ_INT(parse(missing), 2);
}

static void test_usage(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cli_usage(&cmd, out);
    fclose(out);
    CHECK_EQ_STR(text,
                 "usage: test [options] -- PROGRAM\n"
                 "\n"
                 "  -f, --flag        a flag\n"
                 "      --no-on       clears on\n"
                 "  -n, --name NAME   a name\n"
                 "                    over two lines\n"
                 "  -p, --pid PID     a process\n"
                 "  -r, --rate HZ     samples per second\n"
                 "      --max-rate HZ or max\n"
                 "\n"
                 "More:\n"
                 "      --seconds=SECS\n"
                 "                    how long\n"
                 "      --a-very-long-option ARGUMENT\n"
                 "                    its help on the next line\n"
                 "  -s, --subprocesses\n"
                 "                    handled elsewhere\n"
                 "      --format F    one of a, b\n"
                 "  -h, --help        this help\n"
                 "\n"
                 "the end\n");
    free(text);
}

int main(void)
{
    test_parse();
    test_refusals();
    test_usage();
    return unit_report("cli");
}
