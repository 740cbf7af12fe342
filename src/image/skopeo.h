/* Helper tools run as subprocesses (skopeo: every transport, auth,
 * mirrors, registries.conf, signatures policy; containers/image). */
#pragma once
#include "image/image.h"

struct pd_tool_out {
        char tail[2048];        /* its last lines */
        size_t len;
        int status;
};

/* Run argv (stdin /dev/null; stdout and stderr as lines to o's progress
 * callback); 0 if it exited 0, else -EIO with its last line in err. With
 * watch_dir, the sizes of the blobs skopeo is writing there are reported
 * every 250 ms (PD_IMAGE_EV_DOWNLOAD). */
int pd_tool_run(char *const argv[], const char *watch_dir, const struct pd_image_opts *o, struct pd_tool_out *out,
                struct pd_error *err);
