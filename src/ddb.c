/* ddb.c - stub, to be written */
#include "outboxd.h"
