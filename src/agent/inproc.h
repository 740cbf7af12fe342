/* paddock-agent's loop linked into the lean `paddock` binary (meson: the
 * agent's sources built again with -DPD_AGENT_INPROC), for the container
 * tier's one-shot `paddock run`: its sandbox child runs the agent itself
 * instead of exec'ing paddock-agent (src/jail/agent_inproc.c), which saves
 * an execve, the agent's start and its page faults on every run. */
#pragma once

/* The agent's main(): the same command line paddock-agent takes
 * (pd_fds_agent_argv builds it). Returns its exit status. */
int pd_agent_inproc_main(int argc, char **argv);
