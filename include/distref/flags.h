/* distref — command-line flags, absl-style, table-driven.
 *
 * `--name=value` and `--name value` both work; booleans also take a bare
 * `--name` (true) and `--noname` (false). Unknown flags, missing values,
 * malformed numbers and out-of-range values are DR_EUSAGE errors whose
 * message names the flag and what was expected: "--num_gpus: expected an
 * integer, got 'two'". A flag given twice is an error too. A string flag
 * may list its values (choices): "--variant: expected one of ref, openmp,
 * opencl, mpi; got 'cuda'".
 */
#ifndef DISTREF_FLAGS_H
#define DISTREF_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "distref/error.h"

typedef enum dr_flag_type {
    DR_FLAG_STRING,   /* dest: char[DR_FLAG_STR_MAX] */
    DR_FLAG_INT,      /* dest: int64_t, checked against [min, max] */
    DR_FLAG_DOUBLE,   /* dest: double, finite, checked against [min, max]; a NaN
                       * default means "not given" and shows as "unset" */
    DR_FLAG_BOOL      /* dest: bool */
} dr_flag_type;

#define DR_FLAG_STR_MAX 1024

typedef struct dr_flag {
    const char  *name;      /* without the leading dashes */
    dr_flag_type type;
    void        *dest;      /* holds the default on entry */
    double       min, max;  /* for INT and DOUBLE; min > max means unbounded */
    const char  *help;
    bool         seen;      /* set by the parser when the flag was given */
    /* STRING only: NULL, or every value the flag takes, "a|b|c" (an empty
     * alternative, "|a|b", accepts ""). The parser refuses anything else,
     * listing them (and the nearest, when one is close); help lists them. */
    const char  *choices;
    bool         fold_case; /* choices compared ignoring ASCII case */
} dr_flag;

/* Parses argv[0..argc) (the arguments after the command). Returns DR_OK, or
 * DR_EUSAGE with the message in err. "--help" sets *help_requested and stops. */
int  dr_flags_parse(dr_flag *flags, int nflags, int argc, char **argv,
                    bool *help_requested, dr_err *err);

/* Arguments after absl's --flagfile expansion (core/flags_file.c): argv
 * with every --flagfile replaced, in place, by its file's flags; origin[i]
 * is NULL for an argument of the command line, else "FILE:LINE". */
typedef struct dr_flag_args {
    int    argc, cap;
    char **argv;
    char **origin;
} dr_flag_args;

#define DR_FLAGFILE_MAX_DEPTH 16

/* DR_EUSAGE naming the file and line (or the command line) for a file that
 * cannot be read, includes itself, nests too deep, holds a NUL byte, or a
 * --flagfile without a file; *a is empty then. */
int  dr_flag_args_expand(int argc, char **argv, dr_flag_args *a, dr_err *err);
void dr_flag_args_free(dr_flag_args *a);

/* dr_flags_parse over expanded arguments: an error in a file's flag starts
 * with its "FILE:LINE: ", and a flag from a file may be given again later
 * (the later one wins, as in absl); twice on the command line is still an
 * error. */
int  dr_flags_parse_args(dr_flag *flags, int nflags, const dr_flag_args *a, bool *help_requested, dr_err *err);

/* Per flag: "--name=<choices or type>  (default: D)", then its help,
 * indented; every line wrapped at DR_FLAGS_USAGE_WIDTH columns. */
#define DR_FLAGS_USAGE_WIDTH 100
void dr_flags_usage(FILE *out, const dr_flag *flags, int nflags);

/* Writes text to out wrapped at width columns: lines after the first start
 * with indent spaces, breaks go at spaces (dropped) or after '|' and ','
 * (kept), and a word longer than a line is cut. */
void dr_flags_wrap(FILE *out, const char *text, int first_col, int indent, int width);

/* Model Garden's --worker_hosts (comma-separated host:port) and
 * --task_index as TF_CONFIG JSON (core/flags_hosts.c): *out is NULL when
 * --worker_hosts was not given, else the caller's to free. DR_EUSAGE naming
 * the flags when TF_CONFIG (tf_config_env) is also set, when a host is
 * empty, when more than one worker has no --task_index or one past the
 * list, and for --task_index alone. */
int  dr_tf_config_from_hosts(const char *hosts, bool hosts_given, int64_t task_index, bool index_given,
                             const char *tf_config_env, char **out, dr_err *err);

#endif
