/* Recipes: the Dockerfile subset paddock builds (docs/templates.md
 * "Recipes"): FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, ARG, LABEL, CMD,
 * ENTRYPOINT; one stage; comments, blank lines and '\' continuations.
 * Anything else is refused with its line number. */
#pragma once
#include <stdbool.h>

#include "lib/error.h"

enum pd_recipe_op {
        PD_R_FROM, PD_R_RUN, PD_R_COPY, PD_R_ADD, PD_R_ENV, PD_R_WORKDIR, PD_R_USER, PD_R_ARG, PD_R_LABEL,
        PD_R_CMD, PD_R_ENTRYPOINT,
};

#define PD_RECIPE_MAX_STEPS 256
#define PD_RECIPE_MAX_BYTES (1u << 20)

struct pd_recipe_step {
        enum pd_recipe_op op;
        unsigned line;
        char *text;             /* the arguments as written (continuations joined) */
        bool json;              /* RUN/CMD/ENTRYPOINT/COPY in the JSON array form */
};

struct pd_recipe {
        struct pd_recipe_step steps[PD_RECIPE_MAX_STEPS];
        unsigned n;
};

int pd_recipe_parse(const char *text, struct pd_recipe *r, struct pd_error *err);
void pd_recipe_free(struct pd_recipe *r);
const char *pd_recipe_op_name(enum pd_recipe_op op);

/* $NAME, ${NAME}, ${NAME:-word}, ${NAME:+word} from vars ("K=V", n of
 * them; later ones win); "\$" is a literal '$'. A malloc'd string. */
char *pd_recipe_expand(const char *s, char *const *vars, unsigned n, struct pd_error *err);
/* Split "a b 'c d'" words (quotes removed) or a JSON string array into a
 * NULL-terminated malloc'd vector. */
char **pd_recipe_words(const char *s, bool json, struct pd_error *err);
void pd_recipe_words_free(char **w);
