/* Unit tests for src/image/recipe.c (the recipe parser: continuations,
 * comments, refusals with line numbers; variable expansion; word splitting)
 * and src/image/digest.c. TAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/digest.h"
#include "image/recipe.h"
#include "tap.h"


static void refused(const char *text, const char *want)
{
        struct pd_recipe *r = calloc(1, sizeof *r);
        struct pd_error err = { 0 };
        int rc = pd_recipe_parse(text, r, &err);
        char what[300];
        snprintf(what, sizeof what, "refused with '%s'", want);
        ok(rc < 0 && strstr(err.msg, want) && r->n == 0, "%s", what);
        if (rc == 0 || !strstr(err.msg, want))
                printf("# got rc=%d msg=%s\n", rc, err.msg);
        pd_recipe_free(r);
        free(r);
}

static void expands(const char *in, const char *want)
{
        char *vars[] = { "A=1", "B=two words", "EMPTY=", "A=override" };
        struct pd_error err = { 0 };
        char *out = pd_recipe_expand(in, vars, 4, &err);
        char what[300];
        snprintf(what, sizeof what, "'%s' -> '%s'", in, want);
        ok(out && !strcmp(out, want), "%s", what);
        if (!out || strcmp(out, want))
                printf("# got '%s' (%s)\n", out ? out : "(null)", err.msg);
        free(out);
}

int main(void)
{
        struct pd_recipe *r = calloc(1, sizeof *r);
        struct pd_error err = { 0 };
        const char *text = "# comment\n"
                           "ARG BASE=img\n"
                           "from $BASE AS build\n"
                           "\n"
                           "RUN echo a && \\\n"
                           "    # a comment inside\n"
                           "    echo b\n"
                           "CMD [\"/bin/sh\", \"-c\", \"x\"]\n"
                           "copy --chown=1:1 a b /dst/\r\n";
        ok(pd_recipe_parse(text, r, &err) == 0 && r->n == 5, "a recipe parses into 5 steps");
        ok(r->steps[0].op == PD_R_ARG && r->steps[1].op == PD_R_FROM && r->steps[1].line == 3,
           "instructions are case-insensitive, lines counted");
        ok(r->steps[2].op == PD_R_RUN && strstr(r->steps[2].text, "echo a &&") && strstr(r->steps[2].text, "echo b") && !strchr(r->steps[2].text, 0x23) && r->steps[2].line == 5,
           "continuation lines join, comments inside dropped");
        ok(r->steps[3].json && r->steps[3].op == PD_R_CMD, "JSON form noticed");
        ok(!strcmp(r->steps[4].text, "--chown=1:1 a b /dst/"), "CR and trailing blanks dropped");
        pd_recipe_free(r);
        free(r);

        refused("FROM x\nEXPOSE 80\n", "line 2: unknown or unsupported instruction 'EXPOSE'");
        refused("FROM x\nHEALTHCHECK NONE\n", "'HEALTHCHECK'");
        refused("RUN true\nFROM x\n", "line 1: only ARG may come before FROM");
        refused("ARG X\n", "no FROM");
        refused("FROM a\nFROM b\n", "one stage only");
        refused("FROM x\nRUN\n", "line 2: RUN needs arguments");
        refused("FROM x\nAVERYLONGINSTRUCTIONNAME y\n", "unknown instruction");

        expands("$A", "override");
        expands("${B}!", "two words!");
        expands("${NOPE:-dflt}/${EMPTY:-e}/${A:-x}", "dflt/e/override");
        expands("${A:+set}${NOPE:+unset}", "set");
        expands("\\$A $ $1 $NOPE.", "$A $ $1 .");
        {
                char *vars[] = { "A=1" };
                char *out = pd_recipe_expand("${A", vars, 1, &err);
                ok(!out && strstr(err.msg, "unterminated"), "unterminated ${ refused");
                free(out);
        }

        char **w = pd_recipe_words("a 'b c' \"d\\\"e\" f\\ g", false, &err);
        ok(w && !strcmp(w[0], "a") && !strcmp(w[1], "b c") && !strcmp(w[2], "d\"e") && !strcmp(w[3], "f g") && !w[4],
           "words: quotes and escapes");
        pd_recipe_words_free(w);
        w = pd_recipe_words("[\"/bin/sh\", \"-c\", \"x y\"]", true, &err);
        ok(w && !strcmp(w[2], "x y") && !w[3], "JSON words");
        pd_recipe_words_free(w);
        w = pd_recipe_words("[\"a\", 1]", true, &err);
        ok(!w && strstr(err.msg, "JSON array of strings"), "a JSON array with a number refused");

        char hex[65];
        pd_sha256_of("abc", 3, hex);
        ok(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256('abc')");
        ok(pd_digest_parse("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", hex) == 0,
           "digest parses");
        ok(pd_digest_parse("sha512:ab", hex) < 0 && pd_digest_parse("sha256:ABCD", hex) < 0 &&
           pd_digest_parse("sha256:../../etc/passwd", hex) < 0, "other algorithms, upper case and paths refused");

        return tap_done();
}
