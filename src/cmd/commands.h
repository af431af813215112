/* One entry point per subcommand, each in its own file under src/cmd/. */
#ifndef PYSCOPE_CMD_COMMANDS_H
#define PYSCOPE_CMD_COMMANDS_H

int cmd_dump(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_why(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_agent(int argc, char **argv);

#endif
