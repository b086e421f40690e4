#pragma once
#define FLX_VERSION_MAJOR 0
#define FLX_VERSION_MINOR 1
#define FLX_VERSION_PATCH 0
#define FLX_VERSION "0.1.0"
