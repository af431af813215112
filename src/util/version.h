/* pyscope's own version, as --version prints it and every report names its
 * writer: here, so that writers need nothing from the command lines. */
#ifndef PYSCOPE_UTIL_VERSION_H
#define PYSCOPE_UTIL_VERSION_H

#define PYSCOPE_VERSION "0.1.0"

#endif
