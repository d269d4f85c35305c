/* distref — error reporting: see include/distref/error.h. */
#include "distref/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dr_fail(dr_err *err, int code, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

/* Returns the code already in err, so callers can propagate a failure with
 * `return dr_fail_wrap(err, "reading %s", path);`. Without an err there is no
 * code to propagate; DR_EFAULT ("something failed") is the honest answer. */
int dr_fail_wrap(dr_err *err, const char *fmt, ...)
{
    if (err == NULL)
        return DR_EFAULT;

    char joined[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(joined, sizeof joined, fmt, ap);
    va_end(ap);

    /* Append ": <old message>", cutting at the buffer's end: the start of a
     * message says the most, so the old tail is what gets dropped. */
    if (err->msg[0] != '\0') {
        size_t used = strlen(joined);
        size_t room = sizeof joined - 1 - used;
        size_t old_len = strlen(err->msg);
        const char sep[] = ": ";
        size_t sep_len = room < 2 ? room : 2;
        memcpy(joined + used, sep, sep_len);
        used += sep_len;
        room -= sep_len;
        size_t take = old_len < room ? old_len : room;
        memcpy(joined + used, err->msg, take);
        joined[used + take] = '\0';
    }
    memcpy(err->msg, joined, sizeof joined);
    return err->code;
}

const char *dr_code_name(int code)
{
    switch (code) {
    case DR_OK:           return "DR_OK";
    case DR_EUSAGE:       return "DR_EUSAGE";
    case DR_EIO:          return "DR_EIO";
    case DR_EFORMAT:      return "DR_EFORMAT";
    case DR_ENOMEM:       return "DR_ENOMEM";
    case DR_EDEVICE_OOM:  return "DR_EDEVICE_OOM";
    case DR_EUNSUPPORTED: return "DR_EUNSUPPORTED";
    case DR_ESTATE:       return "DR_ESTATE";
    case DR_EINTERRUPTED: return "DR_EINTERRUPTED";
    case DR_EFAULT:       return "DR_EFAULT";
    default:              return "DR_E(unknown)";
    }
}
