#include "image.h"

int pd_image_build(struct pd_state *st, const char *name, const char *recipe_path, const char *context,
                   char *const *build_args, unsigned n_args, const struct pd_image_opts *o, struct pd_error *err)
{
        return pd_error_setx(err, ENOTSUP, "not yet");
}
