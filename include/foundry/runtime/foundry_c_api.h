/* The C types shared by every compiled model's API. Each compiled model's generated model.h
 * includes this file and declares its functions with the model's name as prefix:
 *
 *   int  NAME_create(const char* model_dir, NAME_model** out);
 *   int  NAME_run(NAME_model* model, const foundry_tensor* inputs, size_t num_inputs,
 *                 foundry_tensor* outputs, size_t num_outputs);
 *   size_t NAME_num_inputs(void);   size_t NAME_num_outputs(void);
 *   int  NAME_input_info(size_t index, foundry_tensor_info* info);
 *   int  NAME_output_info(size_t index, foundry_tensor_info* info);
 *   void NAME_destroy(NAME_model* model);
 *   const char* NAME_last_error(void);
 *
 * No C++ types cross this boundary and no function aborts: errors are return codes, with a
 * message for the calling thread in NAME_last_error(). */
#ifndef FOUNDRY_C_API_H
#define FOUNDRY_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FOUNDRY_MAX_RANK 8

/* The most threads a model's parallel loops use: a larger FOUNDRY_NUM_THREADS or foundryc/foundry-run
 * --threads is lowered to it with a warning (OpenMP's runtime aborts the process when it cannot
 * start the threads asked for, around 50,000 on Linux). */
#define FOUNDRY_MAX_THREADS 1024

/* Element types (the same numbering as torch.export's ScalarType). */
typedef enum foundry_dtype {
  FOUNDRY_UINT8 = 1,
  FOUNDRY_INT8 = 2,
  FOUNDRY_INT16 = 3,
  FOUNDRY_INT32 = 4,
  FOUNDRY_INT64 = 5,
  FOUNDRY_FLOAT16 = 6,
  FOUNDRY_FLOAT32 = 7,
  FOUNDRY_FLOAT64 = 8,
  FOUNDRY_BOOL = 12,
  FOUNDRY_BFLOAT16 = 13
} foundry_dtype;

/* Return codes. */
typedef enum foundry_status {
  FOUNDRY_OK = 0,
  FOUNDRY_ERROR_INVALID_ARGUMENT = 1, /* wrong input count, dtype, rank or shape; null pointers */
  FOUNDRY_ERROR_IO = 2,               /* the model folder or its weights could not be read */
  FOUNDRY_ERROR_OUT_OF_MEMORY = 3,
  FOUNDRY_ERROR_RUNTIME = 4           /* a bad value met while running (an index out of range) */
} foundry_status;

/* A dense, row-major tensor owned by the caller. For inputs, `shape` is the actual shape; for
 * outputs, `data` must hold the output's bytes and `shape` is filled in by run. */
typedef struct foundry_tensor {
  void* data;
  int32_t dtype; /* a foundry_dtype */
  int32_t rank;
  int64_t shape[FOUNDRY_MAX_RANK];
} foundry_tensor;

/* What a model expects: a dimension of -1 is dynamic, with its bounds in min_shape/max_shape. */
typedef struct foundry_tensor_info {
  const char* name;
  int32_t dtype;
  int32_t rank;
  int64_t shape[FOUNDRY_MAX_RANK];
  int64_t min_shape[FOUNDRY_MAX_RANK];
  int64_t max_shape[FOUNDRY_MAX_RANK];
} foundry_tensor_info;

#ifdef __cplusplus
}
#endif

#endif /* FOUNDRY_C_API_H */
