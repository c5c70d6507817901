#pragma once
#define MY_COPY_STRIDE blockDim.x
