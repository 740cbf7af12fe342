/* libFuzzer target: the network policy JSON (src/net/policy_json.c), which
 * the server takes from API callers (POST /sandboxes "network", PUT
 * .../network) and `paddock run --net-policy` from a file.
 *
 * A policy that parses is written back with pd_netpol_to_json_str; that
 * text must parse again and write back to the same text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/policy.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct pd_netpol pol = { 0 };
        struct pd_error err = { 0 };
        if (pd_netpol_from_json_str((const char *)data, size, &pol, &err) < 0) {
                CHECK(err.msg[0]);
                pd_netpol_free(&pol);
                return 0;
        }
        char *text = pd_netpol_to_json_str(&pol);
        CHECK(text);
        struct pd_netpol again = { 0 };
        if (pd_netpol_from_json_str(text, strlen(text), &again, &err) < 0) {
                fprintf(stderr, "policy written as %s does not parse back: %s\n", text, err.msg);
                abort();
        }
        char *text2 = pd_netpol_to_json_str(&again);
        CHECK(text2);
        if (strcmp(text, text2)) {
                fprintf(stderr, "policy round trip differs:\n%s\n%s\n", text, text2);
                abort();
        }
        free(text);
        free(text2);
        pd_netpol_free(&pol);
        pd_netpol_free(&again);
        return 0;
}
