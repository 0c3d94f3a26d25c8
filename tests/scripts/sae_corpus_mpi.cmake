# `mpirun -np 2 vocablens features --corpus` against one process: the SAE corpus statistics (counts, histograms,
# max-activating contexts, MSE / explained variance / CE metrics) are the same bit for bit (vocablens/sae_corpus.hpp).
if(VOCABLENS_MPI)
  if(MPI_CXX_FOUND)
    add_test(NAME sae_corpus_mpi COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/sae_corpus_mpi.sh
             $<TARGET_FILE:vocablens_cli> ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/../shared/fixtures)
  else()
    add_test(NAME sae_corpus_mpi COMMAND sh -c "echo 'MPI was not found at configure time: install libopenmpi-dev openmpi-bin (scripts/setup.sh) or configure with -DVOCABLENS_MPI=OFF'; exit 1")
  endif()
  set_tests_properties(sae_corpus_mpi PROPERTIES TIMEOUT 300 LABELS "mpi"
                       ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
endif()
