/* Unit tests for the microvm boot assets' memo (src/vm/assets_memo.c): the
 * remembered key is used only while every input is the same file it was
 * (rewritten, replaced, touched or gone: computed again). TAP. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vm/vm.h"
#include "tap.h"

static void put(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        fputs(text, f);
        fclose(f);
}

int main(void)
{
        char dir[] = "/tmp/pd-test-memo-XXXXXX";
        if (!mkdtemp(dir))
                return 1;
        char a[256], b[256], sig[4096], sig2[4096];
        snprintf(a, sizeof a, "%s/agent", dir);
        snprintf(b, sizeof b, "%s/mkroot", dir);
        put(a, "agent v1");
        put(b, "mkroot");
        const char *const paths[] = { a, b, NULL };
        uint64_t h = 0, hr = 0;

        pd_vm_assets_sig(sig, sizeof sig, paths, "guest /x 6.1");
        ok(pd_vm_assets_memo_get(dir, sig, &h, &hr) == 0, "no memo yet: a miss");
        pd_vm_assets_memo_put(dir, sig, 0x1234, 0xabcd);
        ok(pd_vm_assets_memo_get(dir, sig, &h, &hr) == 1 && h == 0x1234 && hr == 0xabcd,
           "the same inputs: the remembered keys");

        pd_vm_assets_sig(sig2, sizeof sig2, paths, "guest /x 6.2");
        ok(pd_vm_assets_memo_get(dir, sig2, &h, &hr) == 0, "another guest kernel release: a miss");

        /* the agent rewritten in place, same size: its mtime/ctime move */
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
        put(a, "agent v2");
        pd_vm_assets_sig(sig2, sizeof sig2, paths, "guest /x 6.1");
        ok(strcmp(sig, sig2) != 0 && pd_vm_assets_memo_get(dir, sig2, &h, &hr) == 0,
           "the agent rewritten (same size): a miss");

        /* replaced by another file (rename over it): another inode */
        char t[300];
        snprintf(t, sizeof t, "%s.new", a);
        put(t, "agent v2");
        pd_vm_assets_sig(sig, sizeof sig, paths, "guest /x 6.1");
        pd_vm_assets_memo_put(dir, sig, 1, 2);
        rename(t, a);
        pd_vm_assets_sig(sig2, sizeof sig2, paths, "guest /x 6.1");
        ok(pd_vm_assets_memo_get(dir, sig2, &h, &hr) == 0, "the agent replaced by a rename: a miss");

        unlink(b);
        pd_vm_assets_sig(sig2, sizeof sig2, paths, "guest /x 6.1");
        ok(strstr(sig2, "missing") && pd_vm_assets_memo_get(dir, sig2, &h, &hr) == 0, "an input gone: a miss");

        /* a memo whose keys line is damaged is no memo */
        char m[300];
        snprintf(m, sizeof m, "%s/assets.memo", dir);
        pd_vm_assets_sig(sig, sizeof sig, paths, "guest /x 6.1");
        char bad[4200];
        snprintf(bad, sizeof bad, "%skeys zz", sig);
        put(m, bad);
        ok(pd_vm_assets_memo_get(dir, sig, &h, &hr) == 0, "a damaged memo: a miss");

        unlink(m);
        unlink(a);
        rmdir(dir);
        return tap_done();
}
