/* sqs.c - stub, to be written */
#include "outboxd.h"
