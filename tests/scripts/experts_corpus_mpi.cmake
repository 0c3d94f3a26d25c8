# `mpirun -np 2 vocablens experts --corpus` against one process: each expert's load, routed count, routed tokens and
# written tokens are equal, its mean weight and direction norm within float64 rounding (vocablens/experts.hpp).
if(VOCABLENS_MPI)
  if(MPI_CXX_FOUND)
    add_test(NAME experts_corpus_mpi COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/experts_corpus_mpi.sh
             $<TARGET_FILE:vocablens_cli> ${PROJECT_SOURCE_DIR})
  else()
    add_test(NAME experts_corpus_mpi COMMAND sh -c "echo 'MPI was not found at configure time: install libopenmpi-dev openmpi-bin (scripts/setup.sh) or configure with -DVOCABLENS_MPI=OFF'; exit 1")
  endif()
  set_tests_properties(experts_corpus_mpi PROPERTIES TIMEOUT 300 LABELS "mpi"
                       ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
endif()
