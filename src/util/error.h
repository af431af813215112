/* Errors a user can act on: a category (which is also the exit status) and a
 * message that names the thing that failed. */
#ifndef PYSCOPE_UTIL_ERROR_H
#define PYSCOPE_UTIL_ERROR_H

enum pyscope_status {
    PYSCOPE_OK = 0,
    PYSCOPE_ERR_OTHER = 1,
    PYSCOPE_ERR_USAGE = 2,
    PYSCOPE_ERR_NO_PROCESS = 3,
    PYSCOPE_ERR_PERMISSION = 4,
    PYSCOPE_ERR_NOT_PYTHON = 5,
    PYSCOPE_ERR_UNSUPPORTED = 6,
    PYSCOPE_ERR_EXITED = 7,
};

struct pyscope_error {
    enum pyscope_status status;
    char message[512];
    char hint[1024];
};

__attribute__((format(printf, 3, 4)))
void error_set(struct pyscope_error *err, enum pyscope_status status, const char *fmt, ...);
__attribute__((format(printf, 2, 3)))
void error_hint(struct pyscope_error *err, const char *fmt, ...);
/* Prints "pyscope: message" and the hint to stderr; returns the exit status. */
int error_report(const struct pyscope_error *err);

#endif
