/* placeholder: being written */
#include "cli.h"
int pd_cmd_remote(const char *verb, int argc, char **argv) { (void)argc; (void)argv; pd_cli_error("%s: not built yet", verb); return PD_EXIT_PADDOCK; }
