/* placeholder: being written */
#include "cli.h"
int pd_cmd_serve(int argc, char **argv) { (void)argc; (void)argv; pd_cli_error("serve: not built yet"); return PD_EXIT_PADDOCK; }
int pd_cmd_key(int argc, char **argv) { (void)argc; (void)argv; pd_cli_error("key: not built yet"); return PD_EXIT_PADDOCK; }
int pd_cmd_template(int argc, char **argv) { (void)argc; (void)argv; pd_cli_error("template: not built yet"); return PD_EXIT_PADDOCK; }
