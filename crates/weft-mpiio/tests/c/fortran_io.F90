! A Fortran program with a view and a collective write, then a collective
! read back, through the mpif.h interface (-DMPIFH), `use mpi_f08` (-DF08)
! or `use mpi` (default): one source, the three bindings' handle types
! chosen below (every call passes ierr, which mpi_f08 takes as optional).
! OpenMPI's Fortran bindings call PMPI_File_open, PMPI_File_c2f/f2c and the
! other PMPI_File_* functions. Run on a weft: name and on a local name; the
! Rust test compares the files' bytes.
! usage: fortran_io PATH
program fortran_io
#if defined(F08)
  use mpi_f08
#elif !defined(MPIFH)
  use mpi
#endif
  implicit none
#ifdef MPIFH
  include 'mpif.h'
#endif
  integer, parameter :: block = 50, rounds = 6
  integer :: ierr, rank, nprocs, i, failures, total
#ifdef F08
  type(MPI_File) :: fh
  type(MPI_Datatype) :: contig, filetype
  type(MPI_Status) :: status
#else
  integer :: fh, contig, filetype
  integer :: status(MPI_STATUS_SIZE)
#endif
  integer(kind=MPI_OFFSET_KIND) :: disp, size
  integer(kind=MPI_ADDRESS_KIND) :: lb, extent
  integer :: outbuf(block * rounds), inbuf(block * rounds)
  character(len=1024) :: path

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call get_command_argument(1, path)
  failures = 0
  do i = 1, block * rounds
    outbuf(i) = rank * 100000 + i
  end do
  call MPI_Type_contiguous(block, MPI_INTEGER, contig, ierr)
  lb = 0
  extent = int(nprocs, MPI_ADDRESS_KIND) * block * 4
  call MPI_Type_create_resized(contig, lb, extent, filetype, ierr)
  call MPI_Type_commit(filetype, ierr)
  disp = int(rank, MPI_OFFSET_KIND) * block * 4

  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh, ierr)
  if (ierr /= MPI_SUCCESS) call fail('open')
  call MPI_File_set_view(fh, disp, MPI_INTEGER, filetype, 'native', MPI_INFO_NULL, ierr)
  if (ierr /= MPI_SUCCESS) call fail('set_view')
  call MPI_File_write_all(fh, outbuf, block * rounds, MPI_INTEGER, status, ierr)
  if (ierr /= MPI_SUCCESS) call fail('write_all')
  call MPI_File_close(fh, ierr)
  if (ierr /= MPI_SUCCESS) call fail('close')

  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_RDONLY, MPI_INFO_NULL, fh, ierr)
  if (ierr /= MPI_SUCCESS) call fail('reopen')
  call MPI_File_get_size(fh, size, ierr)
  if (size /= int(nprocs, MPI_OFFSET_KIND) * block * rounds * 4) failures = failures + 1
  call MPI_File_set_view(fh, disp, MPI_INTEGER, filetype, 'native', MPI_INFO_NULL, ierr)
  inbuf = 0
  call MPI_File_read_all(fh, inbuf, block * rounds, MPI_INTEGER, status, ierr)
  if (ierr /= MPI_SUCCESS) call fail('read_all')
  if (any(inbuf /= outbuf)) failures = failures + 1
  call MPI_File_close(fh, ierr)

  call MPI_Type_free(filetype, ierr)
  call MPI_Type_free(contig, ierr)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. total == 0) print '(a)', 'fortran_io OK'
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1
contains
  subroutine fail(what)
    character(len=*), intent(in) :: what
    print '(a,i0,a,a)', 'rank ', rank, ': failed: ', what
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end subroutine fail
end program fortran_io
