/* The chooser's facts as JSON (`paddock tiers --json`, GET /api/v1/tiers;
 * docs/api.md "Tiers"): for each tier of this build, available on this host
 * or not and why, what it isolates, its capabilities, the last figures
 * `paddock tiers --measure` kept and the last escape-suite results on this
 * host (<state>/tiers.escape.json, written by the escape suites). Starts no
 * sandbox and measures nothing. */
#pragma once
#include <jansson.h>
#include <stddef.h>

/* Where the escape suites leave their per-tier summary, in a state dir. */
#define PD_TIERS_ESCAPE_FILE "tiers.escape.json"

/* {"tiers": [...]}, a new reference (NULL only when out of memory). */
json_t *pd_tiers_json(int state_dirfd);
/* The escape suite's last results for tier: a new object {date, attacks,
 * blocked, allowed, not_implemented, errors, results, matrix}, or NULL with
 * why said in why ("never run on this host", or what is wrong with the
 * file: it is read, never trusted to be well formed). */
json_t *pd_tier_escape_get(int state_dirfd, const char *tier, char *why, size_t size);
