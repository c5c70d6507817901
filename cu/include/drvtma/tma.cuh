// drvtma device helpers: everything, in one include.
#pragma once
#include "common.cuh"
#include "status.cuh"
#include "mbarrier.cuh"
#include "sync.cuh"
#include "copy.cuh"
