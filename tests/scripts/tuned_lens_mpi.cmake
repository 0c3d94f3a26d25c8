# `mpirun -np 2` (OpenMPI, scripts/setup.sh) against one process: the corpus lens gives the same numbers bit for
# bit, tuned-lens training the same translators within float32 rounding (vocablens/dist.hpp, docs/lens.md).
if(VOCABLENS_MPI)
  if(MPI_CXX_FOUND)
    add_test(NAME tuned_lens_mpi COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/tuned_lens_mpi.sh
             $<TARGET_FILE:vocablens_cli> ${PROJECT_SOURCE_DIR}/../shared/fixtures)
  else()
    add_test(NAME tuned_lens_mpi COMMAND sh -c "echo 'MPI was not found at configure time: install libopenmpi-dev openmpi-bin (scripts/setup.sh) or configure with -DVOCABLENS_MPI=OFF'; exit 1")
  endif()
  set_tests_properties(tuned_lens_mpi PROPERTIES TIMEOUT 300 LABELS "mpi"
                       ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
endif()
