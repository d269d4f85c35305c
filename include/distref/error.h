/* distref — error reporting.
 *
 * Library code never exits or aborts on user input: it returns a dr_code and
 * fills a dr_err with a message that names the flag, file, field or line and
 * what was expected. Only the CLI turns codes into exit statuses
 * (DR_EUSAGE -> 2, anything else -> 1).
 */
#ifndef DISTREF_ERROR_H
#define DISTREF_ERROR_H

typedef enum dr_code {
    DR_OK = 0,
    DR_EUSAGE,       /* bad flag, flag value, config field: the caller's mistake */
    DR_EIO,          /* a file could not be opened, read or written */
    DR_EFORMAT,      /* a file exists but its content is corrupt or mismatched */
    DR_ENOMEM,       /* host allocation failed */
    DR_EDEVICE_OOM,  /* an emulated device ran out of its configured memory */
    DR_EUNSUPPORTED, /* a valid request for something not built yet */
    DR_ESTATE,       /* an API called in the wrong state (e.g. TPU not initialized) */
    DR_EFAULT,       /* an injected or detected runtime fault (worker/ps failure) */
    DR_EINTERRUPTED  /* stopped on request (SIGINT/SIGTERM) after a checkpoint */
} dr_code;

typedef struct dr_err {
    int  code;
    char msg[512];
} dr_err;

/* Formats the message into err (if non-NULL) and returns code, so callers
 * write `return dr_fail(err, DR_EUSAGE, "--num_gpus: expected ...");`. */
int dr_fail(dr_err *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefixes context to an existing message: "reading foo.idx: <old msg>". */
int dr_fail_wrap(dr_err *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

const char *dr_code_name(int code);

#endif
