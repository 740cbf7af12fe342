#include "lib/spec.h"

#include <errno.h>
#include <string.h>

void pd_spec_defaults(struct pd_spec *s)
{
        memset(s, 0, sizeof *s);
        s->isolation = PD_ISO_CONTAINER;
        s->template_name = "base";
        s->memory_bytes = PD_DEFAULT_MEMORY;
        s->disk_bytes = PD_DEFAULT_DISK;
        s->pids = PD_DEFAULT_PIDS;
        s->millicpus = PD_DEFAULT_MILLICPUS;
        s->net = PD_NET_NONE;
        s->hostname = "paddock";
}

static const char *const iso_names[] = {
        [PD_ISO_PROCESS] = "process",
        [PD_ISO_CONTAINER] = "container",
        [PD_ISO_SUPERVISED] = "supervised",
        [PD_ISO_MICROVM] = "microvm",
};

const char *pd_isolation_name(enum pd_isolation i)
{
        return (unsigned)i < sizeof iso_names / sizeof *iso_names ? iso_names[i] : "unknown";
}

int pd_isolation_parse(const char *s, enum pd_isolation *out)
{
        for (unsigned i = 0; i < sizeof iso_names / sizeof *iso_names; i++)
                if (strcmp(s, iso_names[i]) == 0) {
                        *out = (enum pd_isolation)i;
                        return 0;
                }
        return -EINVAL;
}
