/* distref conformance — suite 6: durability of the run directory.
 *
 * scripts/durability.sh kills a checkpointing run (mirrored, 2 replicas,
 * 9 steps, a checkpoint every 2) at its write, fsync, rename and openat
 * calls (strace fault injection; every one of the rare calls, a sample of
 * the frequent ones), resumes it, and compares every step's loss_bits and
 * the final weights_sha256 with the uninterrupted run. Each kill point is a
 * case here. make conformance also runs the script against a distref built
 * with the old write order (the checkpoint renamed before the metrics that
 * lead up to it: DR_MUTANT_CKPT_FIRST in core/run_log.c), which must fail.
 */
#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI */
#endif
#include "conformance/conformance.h"

#include <stdio.h>
#include <string.h>

int suite_durability(results *r)
{
    FILE *p;
    char line[512];
    int fails = 0, cases = 0;
    if (r->fault) return 0;   /* engine mutants do not reach the run directory's writes */
    if (r->variant) return 0; /* --variant: one variant's slice; this suite is the CLI's, not a variant's */
    p = popen("sh scripts/durability.sh " DR_BIN " 8 2>&1", "r");
    if (!p) {
        record(r, "durability", NULL, 2, false, 0, "could not start scripts/durability.sh");
        return 1;
    }
    while (fgets(line, sizeof line, p)) {
        bool pass;
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "kill at ", 8) != 0) {
            if (strstr(line, "durability")) printf("%s\n", line);
            continue;
        }
        pass = strstr(line, "bit-exact") != NULL;
        record(r, "durability", NULL, 2, pass, 0, "%s", line);
        fails += !pass;
        cases++;
    }
    if (pclose(p) != 0 && fails == 0) {
        record(r, "durability", NULL, 2, false, 0, "scripts/durability.sh failed (%d kill points recorded)", cases);
        fails++;
    }
    return fails;
}
