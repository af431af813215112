/* -s/--subprocesses for the one-shot commands (dump, why): the command runs
 * once for every Python process of the tree under PID, each headed by its
 * role, or as one JSON document {"processes": [...]}. */
#ifndef PYSCOPE_CMD_TREE_H
#define PYSCOPE_CMD_TREE_H

#include <stdbool.h>

/* Is -s or --subprocesses among the options (before a "--")? */
bool tree_requested(int argc, char **argv);

/* Runs cmd for root (the last argument) and each Python descendant, with
 * -s removed and the PID replaced, each in a child process of its own so
 * that every run starts afresh. Returns 0 when every run did, else the
 * first failing run's status (5 when no process of the tree is Python). */
int tree_run(int argc, char **argv, int (*cmd)(int argc, char **argv));

#endif
