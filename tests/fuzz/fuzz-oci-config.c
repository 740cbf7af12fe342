/* libFuzzer target: paddock-oci's config.json parser (src/oci/config.c).
 * The bundle comes from the engine (podman, containerd) on behalf of
 * whoever wrote the image's config: hostile as far as the parser goes.
 *
 * The input is the config.json text; the bundle is a temporary directory
 * with an empty rootfs/ (made once), so relative root.path values resolve
 * as they would for an engine. Whatever the result, oci_config_free must
 * release everything (LSan checks at exit and on -detect_leaks runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci/oci.h"

static char bundle[64];

static void rm_bundle(void)
{
        char p[96];
        snprintf(p, sizeof p, "%s/rootfs", bundle);
        rmdir(p);
        rmdir(bundle);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        snprintf(bundle, sizeof bundle, "/tmp/paddock-fuzz-oci.XXXXXX");
        char p[96];
        if (!mkdtemp(bundle))
                exit(1);
        snprintf(p, sizeof p, "%s/rootfs", bundle);
        if (mkdir(p, 0755) < 0)
                exit(1);
        atexit(rm_bundle);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t je;
        /* as oci_config_load reads it */
        json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
        if (!root)
                return 0;
        struct oci_config c;
        struct pd_error err = { 0 };
        (void)oci_config_parse(root, bundle, &c, &err);
        oci_config_free(&c);
        return 0;
}
